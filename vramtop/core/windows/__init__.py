"""The Windows side of a WSL2 machine: who holds the card, and whether the WSL VM spilled.

Pure: lines and recorded fields go in, frozen values come out; time is passed in."""
