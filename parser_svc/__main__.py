from parser_svc.server import main

main()
