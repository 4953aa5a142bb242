"""The plugin's own tests run test files in a child pytest (``pytester``)."""

pytest_plugins = ["pytester"]
