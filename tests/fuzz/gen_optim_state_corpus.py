"""Seed corpus for tests/fuzz/fuzz_optim_state.c: optimizer and LR scheduler state dicts as
torch.optim writes them (torch.save), over a [5, 4] and a [5] parameter after two steps, and
one training checkpoint dict {"optimizer": ..., "scheduler": ...}. Run with a PyTorch 2.x
python from the repository root; writes tests/fuzz/corpus/optim_state/*.pt."""
import os

import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "optim_state")
O = torch.optim
L = torch.optim.lr_scheduler

OPTIMIZERS = {
    "sgd": lambda p: O.SGD(p, lr=0.05, momentum=0.9),
    "adam": lambda p: O.Adam(p, lr=0.02),
    "adam_amsgrad": lambda p: O.Adam(p, lr=0.02, amsgrad=True),
    "adamw": lambda p: O.AdamW(p, lr=0.02),
    "rmsprop_centered": lambda p: O.RMSprop(p, lr=0.01, momentum=0.5, centered=True),
    "adagrad": lambda p: O.Adagrad(p, lr=0.1),
    "adadelta": lambda p: O.Adadelta(p),
    "adamax": lambda p: O.Adamax(p),
    "nadam": lambda p: O.NAdam(p),
    "radam": lambda p: O.RAdam(p),
    "asgd": lambda p: O.ASGD(p),
    "rprop": lambda p: O.Rprop(p),
    "lbfgs": lambda p: O.LBFGS(p, history_size=3, max_iter=2),
}

SCHEDULERS = {
    "steplr": lambda o: L.StepLR(o, 3, 0.5),
    "cosine": lambda o: L.CosineAnnealingLR(o, 10),
    "warm_restarts": lambda o: L.CosineAnnealingWarmRestarts(o, 3, 2),
    "linear": lambda o: L.LinearLR(o, 0.5, 1.0, 4),
    "polynomial": lambda o: L.PolynomialLR(o, 4, 1.0),
}


def params():
    g = torch.Generator().manual_seed(3)
    return [torch.randn(5, 4, generator=g).requires_grad_(True),
            torch.randn(5, generator=g).requires_grad_(True)]


def loss_of(p):
    return (p[0] ** 2).sum() + (p[1] ** 3).sum()


def trained(make):
    p = params()
    opt = make(p)
    for _ in range(2):
        def closure():
            opt.zero_grad()
            loss = loss_of(p)
            loss.backward()
            return loss
        opt.step(closure)
    return p, opt


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, make in OPTIMIZERS.items():
        _, opt = trained(make)
        torch.save(opt.state_dict(), os.path.join(OUT, name + ".pt"))
    for name, make in SCHEDULERS.items():
        _, opt = trained(OPTIMIZERS["sgd"])
        sched = make(opt)
        sched.step()
        torch.save(sched.state_dict(), os.path.join(OUT, "sched_" + name + ".pt"))
    _, opt = trained(OPTIMIZERS["adam"])
    sched = L.StepLR(opt, 3, 0.5)
    sched.step()
    torch.save({"epoch": 1, "optimizer": opt.state_dict(), "scheduler": sched.state_dict()},
               os.path.join(OUT, "checkpoint.pt"))


if __name__ == "__main__":
    main()
