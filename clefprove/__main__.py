from clefprove.cli.main import entry

entry()
