"""Pure figure builders: ``make_*_figure(data...) -> go.Figure``. No Streamlit here; colours from ``theme``."""
