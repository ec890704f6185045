from pgrpo.cli import main

main()
