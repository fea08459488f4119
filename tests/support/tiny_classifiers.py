"""Tiny sequence classifiers built offline for the classifier detectors' tests (nothing is
downloaded): a random-init BERT with a word-level tokenizer over ``w0`` .. ``w49``, saved as a
transformers folder, and that folder's ONNX export (``torch.onnx.export``, the TorchScript
exporter: it needs the ``onnx`` package, the dev extra's)."""

from __future__ import annotations

import warnings
from pathlib import Path

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + [f"w{i}" for i in range(50)]


def tiny_classifier(path: Path, bias=(0.0, 0.0), labels=("SAFE", "INJECTION"), *, weight_std: float = 0.0,
                    init_range: float = 0.02, hidden: int = 16, seed: int = 0, token_types: bool = True) -> Path:
    """A 2-layer BERT in ``path``. With ``weight_std=0`` the classifier head's ``bias`` decides its
    verdict on every text; a positive ``weight_std`` draws the head's weights and, with a wide
    ``init_range`` (BERT's ``initializer_range``), scores vary from window to window. The
    tokenizer makes token_type_ids when ``token_types``; weights depend on ``seed`` only."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]",
                                                       special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", model_max_length=32,
                                   model_input_names=["input_ids", "attention_mask"]
                                   + (["token_type_ids"] if token_types else []))
    cfg = BertConfig(vocab_size=len(WORDS), hidden_size=hidden, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=2 * hidden, max_position_embeddings=64, num_labels=len(labels),
                     initializer_range=init_range,
                     id2label=dict(enumerate(labels)), label2id={v: i for i, v in enumerate(labels)})
    torch.manual_seed(seed)
    model = BertForSequenceClassification(cfg)
    with torch.no_grad():
        if weight_std:
            model.classifier.weight.normal_(0.0, weight_std)
        else:
            model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.tensor(bias))
    model.save_pretrained(path)
    fast.save_pretrained(path)
    return path


def export_onnx(folder: Path, into: Path | None = None, *, token_type_ids: bool = True,
                graph: str = "model.onnx") -> Path:
    """``folder``'s model as ``into/graph`` (``into`` defaults to ``folder``; ``graph`` may be
    ``onnx/model.onnx``), with inputs input_ids, attention_mask and, when ``token_type_ids``,
    token_type_ids; batch and sequence axes dynamic. Returns the ONNX file."""
    import torch
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(folder, local_files_only=True).eval()
    names = ["input_ids", "attention_mask"] + (["token_type_ids"] if token_type_ids else [])
    ids = torch.tensor([[2, 4, 5, 6, 3], [2, 7, 3, 0, 0]])  # a padded batch, so the mask is traced
    args = (ids, (ids != 0).long()) + ((torch.zeros_like(ids),) if token_type_ids else ())
    out = (into or folder) / graph
    out.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, str(out), input_names=names, output_names=["logits"],
                          dynamic_axes={**{n: {0: "batch", 1: "tokens"} for n in names}, "logits": {0: "batch"}},
                          opset_version=17, dynamo=False)
    return out
