import sys

if __name__ == "__main__":  # a spawned process (memlog/app/ranker.py) imports this module again: it runs nothing
    from memlog.cli import main

    sys.exit(main())
