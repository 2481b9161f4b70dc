"""The demo assets, by kind; ``tests/assets/build_demo_assets.py`` builds them all."""
