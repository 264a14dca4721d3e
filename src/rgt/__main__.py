from rgt.cli import main

main()
