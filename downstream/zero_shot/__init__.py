"""Zero-shot similarity: the cosine of two sentences' pooled frozen features, no training (MTEB's
STS protocol), scored by the task's metrics; a method of its own beside the trained heads."""
