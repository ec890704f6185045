from pgrpo.cli import run

run()
