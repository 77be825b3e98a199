from agent_health.cli.main import main

main()
