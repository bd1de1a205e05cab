from vramtop.entry import run

run()
