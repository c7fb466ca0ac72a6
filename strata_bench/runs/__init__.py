"""The runs behind the commands: parity over the selected cases on each device, with its results written
as it goes. A command parses its options, calls a run, renders what it returns and maps errors to exit
codes; the progress display comes in as a callback, so this layer draws nothing itself."""
