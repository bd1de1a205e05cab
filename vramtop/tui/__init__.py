"""The console (Textual). Renders the latest state, turns keys into actions."""
