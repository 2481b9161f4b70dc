"""cook.media"""
