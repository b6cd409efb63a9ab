"""cardtime's front door: the `cardtime` command (pyproject.toml's console script, `python -m cardtime`), one
word per job handed to the suite, provisioning and reports. It imports those three; nothing imports it. See
cardtime/__main__.py.
"""
