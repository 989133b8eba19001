"""What a finished document says: ranked bottlenecks (``bottlenecks``), the text report
(``report``) and the merge of torchrun ranks (``merge``). Pure functions over the JSON document
(standard library only): the engine imports them without torch."""
