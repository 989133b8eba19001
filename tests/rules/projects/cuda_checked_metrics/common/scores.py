from sklearn.metrics import accuracy_score, f1_score


def accuracy_and_f1(logits, targets):
    predicted = logits.argmax(1).type_as(targets)
    if predicted.is_cuda:
        predicted = predicted.cpu()
        targets = targets.cpu()
    return accuracy_score(predicted, targets), f1_score(predicted, targets, average="macro")
