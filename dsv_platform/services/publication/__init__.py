"""Publication: building realizations through the publisher, gates, approval, quarantine, reading by reference, diff, consumers and status."""
