"""``python -m zoo.bench [key=value ...]``."""

from zoo.bench import main

if __name__ == "__main__":
    main()
