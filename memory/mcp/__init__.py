"""The MCP server: tools, client tokens and client config snippets. The only package that imports the MCP SDK.

See docs/architecture.md for the package map.
"""
