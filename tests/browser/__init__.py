"""Browser tests: the notebooks in real JupyterLab in headless Chromium (pytest -m browser)."""
