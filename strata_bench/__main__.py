from strata_bench.cli.main import main

main()
