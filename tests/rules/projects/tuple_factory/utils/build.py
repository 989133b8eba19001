from acoustic import Decoder, WarmupOptim


def build_model(args, device, train=False):
    model = Decoder(80).to(device)
    if train:
        model.train()
        return model, WarmupOptim(model, args.lr, warmup=4000)
    model.eval()
    return model
