from docparse.cli import main

main()
