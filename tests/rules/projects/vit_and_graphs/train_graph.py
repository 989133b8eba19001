import argparse

import torch

from nets.graph import build_network

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--net", default="mpnn", choices=["mpnn", "setconv"])
    args = parser.parse_args()
    torch.set_float32_matmul_precision("high")
    net = build_network(args.net, 64).cuda()
    net.compile()
    opt = torch.optim.Adam(net.parameters(), fused=True)
    graphs = torch.load("graphs.pt")
    for h, adj, target in graphs:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = net(h.cuda(non_blocking=True), adj.cuda(non_blocking=True))
            loss = (out - target.cuda(non_blocking=True)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
