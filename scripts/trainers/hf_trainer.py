"""A Hugging Face Trainer as a new user runs one (issue 54): a tiny GPT-2
built from a config (no download) on random tokens, 60 steps, a loss log
every 10, an evaluation every 20, everything else as the library's
defaults print it. Needs torch, transformers and accelerate (CPU).

usage: python hf_trainer.py [OUTPUT_DIR]
"""

import sys
import tempfile

import torch
from torch.utils.data import Dataset
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments


class Tokens(Dataset):
    def __init__(self, n):
        self.x = torch.randint(0, 1000, (n, 32))

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"input_ids": self.x[i], "labels": self.x[i]}


out = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="hf-trainer-")
model = GPT2LMHeadModel(GPT2Config(vocab_size=1000, n_positions=64, n_embd=64, n_layer=2, n_head=2))
args = TrainingArguments(
    output_dir=out,
    max_steps=60,
    per_device_train_batch_size=8,
    per_device_eval_batch_size=8,
    logging_steps=10,
    eval_strategy="steps",
    eval_steps=20,
    save_strategy="no",
    report_to=[],
    use_cpu=True,
)
Trainer(model=model, args=args, train_dataset=Tokens(512), eval_dataset=Tokens(64)).train()
