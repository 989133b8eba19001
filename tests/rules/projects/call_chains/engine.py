"""One optimizer step on one batch; the loop that calls it is main.py's."""
import objectives
import scoring


def fit_batch(model, batch, optimizer, device, step=0):
    clips, labels = batch
    clips = clips.to(device, non_blocking=True)
    labels = labels.to(device, non_blocking=True)
    logits = model(clips)
    loss = objectives.total_loss(logits, labels)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    if step % 200 == 0:
        print(step, scoring.per_class(logits, labels))
    return {"loss": loss.detach(), "top1": scoring.top1(logits, labels)}


def summarize(history, epoch):
    print(epoch, scoring.report([h["loss"] for h in history]))
