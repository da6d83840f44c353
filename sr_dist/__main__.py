from sr_dist.cli import main

main()
