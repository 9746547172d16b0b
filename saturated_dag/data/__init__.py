"""The data the paper's figure starts from: the generation pool of sampled, verified
completions (``pool``), its difficulty partitions D and D_prime (``partitions``), and the
training sets built from it, preference pairs, ranked groups and SFT sets
(``preference_data``)."""
