def parse():
    raise SystemExit("options are read from the command line")
