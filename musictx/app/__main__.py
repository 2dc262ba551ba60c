from musictx.app.cli import main

main()
