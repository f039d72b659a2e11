"""The pure core: archfit's decisions over plain data. No I/O: nothing here imports aiohttp,
kubernetes, asyncio or any I/O module (the import contracts hold every module of this folder)."""
