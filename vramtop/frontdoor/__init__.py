"""vramtop's front door: a small process in front of vLLM that forwards every route byte for
byte (streaming included) and holds requests while vLLM restarts, so that an agent's turn
never sees the restart. `python -m vramtop.frontdoor --help`; the protocol is in
`protocol.py`, which imports no server library (the supervisor reads its constants).
"""
