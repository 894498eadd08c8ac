from torch_geometric_hot.train.cli import main

if __name__ == '__main__':
    main()
