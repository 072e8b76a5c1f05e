"""The HTTP front end under `bot.serving.app`: uvicorn accepts connections, an ASGI app reads each
body on the event loop (size limit, read timeout) and hands the request to the bot's synchronous
handlers on a bounded thread pool. Knows HTTP, nothing about alerts or Slack.
"""
