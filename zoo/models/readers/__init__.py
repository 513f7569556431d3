"""Story-QA readers (``task: qa``): memory networks and attentive readers over bAbI-style stories,
all keeping the ``QAModel`` interface of ``qa_model.py``."""
