"""BibTeX of the papers findbench implements: one home for every card, builder and metric."""

FIND = """\
@inproceedings{schwettmann2023find,
  title     = {{FIND}: A Function Description Benchmark for Evaluating Interpretability Methods},
  author    = {Schwettmann, Sarah and Shaham, Tamar Rott and Materzynska, Joanna and Chowdhury, Neil
               and Li, Shuang and Andreas, Jacob and Bau, David and Torralba, Antonio},
  booktitle = {Advances in Neural Information Processing Systems (NeurIPS), Datasets and Benchmarks Track},
  year      = {2023},
  url       = {https://arxiv.org/abs/2309.03886}
}
"""

HUANG2023 = """\
@article{huang2023rigorously,
  title   = {Rigorously Assessing Natural Language Explanations of Neurons},
  author  = {Huang, Jing and Geiger, Atticus and D'Oosterlinck, Karel and Wu, Zhengxuan and Potts, Christopher},
  journal = {arXiv preprint arXiv:2309.10312},
  year    = {2023},
}
"""

__all__ = ["FIND", "HUANG2023"]
