"""The turn: one session's messages in, the agent's answer committed to storage.

``runner`` runs the turn's steps; ``retry`` tries it again while the database lets it down;
``conversations`` says which stored session a message continues; ``hygiene`` compacts a session
that grew too large; ``attachments`` reads a fresh turn's files and tells the user what could not be
used; ``input`` composes what the model sees from the user's side; ``recorder``
stores what the agent produces as it goes; ``slots`` bounds how many agents work at once;
``running`` knows where each turn under way is and whom it answers (for a tool that asks first).
"""
