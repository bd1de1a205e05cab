"""The guard's policies, pure: when to relaunch on the person's behalf, and with which flags.

`decisions` holds the values they exchange with the guard command (an action, a decision) and
the moment a sample describes; `remedy` the automatic remedy of a collapse; `adaptive` the
budget that steps down for a call and back up after it; `coordinator` the one pending action
both share, its wait for a moment between agent turns and its hourly limit. Time is the
samples' clock, passed in: a simulated day plays out as fast as its samples come.
"""
