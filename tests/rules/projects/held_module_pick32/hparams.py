class hp: arch = "gru"; d = 8; h = 64; lr = 1e-3; epochs = 10; data = "x.pt"
