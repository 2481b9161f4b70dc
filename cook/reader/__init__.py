"""cook.reader"""
