DROP TABLE convo.import_origins;
