# The gateway's version (its package.json): the client moves with the API it speaks; test/client/versions.test.ts
# keeps the two equal.
__version__ = "0.1.0"
