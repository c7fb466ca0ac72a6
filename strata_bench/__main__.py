from strata_bench.cli import main

main()
