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

SAEBENCH = """\
@inproceedings{karvonen2025saebench,
  title     = {{SAEBench}: A Comprehensive Benchmark for Sparse Autoencoders in Language Model Interpretability},
  author    = {Karvonen, Adam and Rager, Can and Lin, Johnny and Tigges, Curt and Bloom, Joseph and Chanin, David
               and Lau, Yeu-Tong and Farrell, Eoin and McDougall, Callum and Ayonrinde, Kola and Till, Demian
               and Wearden, Matthew and Conmy, Arthur and Marks, Samuel and Nanda, Neel},
  booktitle = {Proceedings of the 42nd International Conference on Machine Learning (ICML)},
  year      = {2025},
  url       = {https://arxiv.org/abs/2503.09532}
}
"""
