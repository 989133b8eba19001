from run import main

main(mode=2)
