"""The library of every box a user rented: runs indexed by their headline figures (index.py, SQLite),
placed among earlier boxes of their model (place.py) and shared without host names (share.py). Imported by
suite/commands, reports (the first screen's medians) and provisioning (a fetched run is indexed)."""
