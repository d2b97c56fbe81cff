"""CreditLens dashboard: Streamlit pages over the ``engine`` (imports run one way: dashboard → engine)."""
