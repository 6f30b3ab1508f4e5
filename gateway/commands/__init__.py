"""Chat commands: recognising them (``parsing``) and answering them at once, even while a turn
runs (``handlers``; ``/memory`` and ``/forget`` in ``memory``).
"""
