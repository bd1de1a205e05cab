"""The guard: the headless watcher behind `vramtop guard` (commands/guard.py parses its
command line and calls in here). Its policies, pure and clock-free, are `vramtop.core.guard`;
this package runs them against a machine: the loop and its one clock (loop.py), what each
step tells and does (watch.py), what the profile's others told and did, read from the lasting
timeline (others.py), the settings over the profile's fields (choices.py), and the systemd
unit that runs it (unit.py)."""
